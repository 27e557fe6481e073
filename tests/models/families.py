"""Tiny plain-PyTorch definitions of today's model families (issue 42 item 4), written here from
scratch for operator coverage, not accuracy: MobileNet-V3, EfficientNet, ConvNeXt, a ViT, a
GPT-2, a U-Net, a DeepLab head and a Whisper-style audio encoder.

Each is a few thousand parameters (channels 8-32, images 32x32, sequences 16-32, vocabulary 100)
so that its ONNX export stays small enough to commit; ``export_families.py`` writes them to
``tests/models/<family>.onnx``, which ``tests/ansor/graph/test_model_families.py`` imports,
compiles and checks against onnxruntime. ``build(name)`` returns the module in eval mode with
deterministic weights (``torch.manual_seed``), batch-norm statistics randomised so that folding
them is not a no-op.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------- MobileNet-V3


class SqueezeExcite(nn.Module):
    """Squeeze-excitation: global pool, two 1x1 convs, a gate (hard-sigmoid in MobileNet-V3,
    sigmoid in EfficientNet)."""

    def __init__(self, c: int, squeeze: int, act: type[nn.Module], gate: type[nn.Module]):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(c, squeeze, 1)
        self.act = act()
        self.expand = nn.Conv2d(squeeze, c, 1)
        self.gate = gate()

    def forward(self, x):
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


def conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act is not None else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNet-V3 block: 1x1 expand, depthwise kxk, optional SE (hard-sigmoid), 1x1 project,
    residual when shapes allow."""

    def __init__(self, cin: int, mid: int, cout: int, k: int, stride: int, se: bool, act: type[nn.Module]):
        super().__init__()
        self.expand = conv_bn(cin, mid, 1, act=act) if mid != cin else nn.Identity()
        self.dw = conv_bn(mid, mid, k, stride, groups=mid, act=act)
        self.se = SqueezeExcite(mid, max(8, mid // 4), nn.ReLU, nn.Hardsigmoid) if se else nn.Identity()
        self.project = conv_bn(mid, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.Hardswish)                              # 16x16
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 16, 3, 2, True, nn.ReLU),                           # 8x8
            InvertedResidual(16, 32, 24, 3, 1, False, nn.ReLU),
            InvertedResidual(24, 32, 24, 5, 1, True, nn.Hardswish),
            InvertedResidual(24, 32, 32, 5, 2, True, nn.Hardswish))                      # 4x4
        self.last = conv_bn(32, 32, 1, act=nn.Hardswish)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Linear(32, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, classes))

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.last(self.blocks(self.stem(x)))), 1))

# ---------------------------------------------------------------- EfficientNet


class MBConv(nn.Module):
    """EfficientNet block: 1x1 expand (SiLU), depthwise kxk (SiLU), SE (SiLU, sigmoid gate),
    1x1 project, residual."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        self.expand = conv_bn(cin, mid, 1, act=nn.SiLU) if expand != 1 else nn.Identity()
        self.dw = conv_bn(mid, mid, k, stride, groups=mid, act=nn.SiLU)
        self.se = SqueezeExcite(mid, max(4, cin // 4), nn.SiLU, nn.Sigmoid)
        self.project = conv_bn(mid, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


class EfficientNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.SiLU)                                  # 16x16
        self.blocks = nn.Sequential(
            MBConv(16, 8, 3, 1, 1),
            MBConv(8, 16, 3, 2, 2),                                                       # 8x8
            MBConv(16, 16, 5, 1, 2),
            MBConv(16, 24, 5, 2, 2))                                                      # 4x4
        self.last = conv_bn(24, 32, 1, act=nn.SiLU)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.last(self.blocks(self.stem(x)))), 1))

# ---------------------------------------------------------------- ConvNeXt


class ChannelsFirstLayerNorm(nn.Module):
    """LayerNorm over the channel axis of an NCHW map, written out (mean, variance, rsqrt) as
    ConvNeXt's reference code does for its stem and downsampling layers."""

    def __init__(self, c: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    """Depthwise 7x7, permute to channels-last, LayerNorm, 4x MLP with GELU, layer scale,
    permute back, residual."""

    def __init__(self, c: int):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.fc1 = nn.Linear(c, 4 * c)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.rand(c) * 0.5 + 0.25)  # layer scale (1e-6 in training)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.fc2(self.act(self.fc1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 4, 4), ChannelsFirstLayerNorm(16))  # 8x8
        self.stage1 = ConvNeXtBlock(16)
        self.down = nn.Sequential(ChannelsFirstLayerNorm(16), nn.Conv2d(16, 32, 2, 2))  # 4x4
        self.stage2 = ConvNeXtBlock(32)
        self.norm = nn.LayerNorm(32, eps=1e-6)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean((-2, -1))))

# ---------------------------------------------------------------- ViT


class ViT(nn.Module):
    """Patch-embedding conv (8x8 patches of a 32x32 image: 16 tokens), class token, learned
    position embedding, two pre-norm ``nn.TransformerEncoderLayer`` (batch_first, GELU), final
    LayerNorm, head on the class token."""

    def __init__(self, dim: int = 32, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 8, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])

# ---------------------------------------------------------------- GPT-2


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)).view(1, 1, max_len, max_len))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class GPT2Block(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_len)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    """Token and position embeddings (positions from ``torch.arange``), two blocks with a
    ``torch.tril`` causal mask, final LayerNorm, LM head tied to the token embedding."""

    def __init__(self, vocab: int = 100, dim: int = 32, heads: int = 4, max_len: int = 32):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(max_len, dim)
        self.blocks = nn.Sequential(*(GPT2Block(dim, heads, max_len) for _ in range(2)))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.long, device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))

# ---------------------------------------------------------------- U-Net


def double_conv(cin: int, cout: int):
    return nn.Sequential(conv_bn(cin, cout, 3, act=nn.ReLU), conv_bn(cout, cout, 3, act=nn.ReLU))


class UNet(nn.Module):
    """Two levels down (max-pool), up once by ``ConvTranspose2d`` and once by bilinear
    ``F.interpolate``, each followed by a skip concatenation; a 1x1 conv to the classes."""

    def __init__(self, classes: int = 3):
        super().__init__()
        self.enc1, self.enc2, self.mid = double_conv(3, 8), double_conv(8, 16), double_conv(16, 32)
        self.up2 = nn.ConvTranspose2d(32, 16, 2, 2)
        self.dec2 = double_conv(32, 16)
        self.reduce1 = nn.Conv2d(16, 8, 1)
        self.dec1 = double_conv(16, 8)
        self.out = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)                                   # 32x32
        e2 = self.enc2(F.max_pool2d(e1, 2))                 # 16x16
        m = self.mid(F.max_pool2d(e2, 2))                   # 8x8
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))     # 16x16
        up = F.interpolate(self.reduce1(d2), scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(self.dec1(torch.cat([up, e1], 1)))  # 32x32

# ---------------------------------------------------------------- DeepLab


class DeepLab(nn.Module):
    """A strided backbone to 8x8, an ASPP head (1x1, 3x3 at dilations 2 and 3, a global-pool
    branch resized back by bilinear ``F.interpolate``), concatenation, projection, classifier,
    bilinear upsampling to the input size (``align_corners=False``)."""

    def __init__(self, classes: int = 5):
        super().__init__()
        self.backbone = nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.ReLU), conv_bn(16, 32, 3, 2, act=nn.ReLU))
        self.b0 = conv_bn(32, 16, 1, act=nn.ReLU)
        self.b1 = nn.Sequential(nn.Conv2d(32, 16, 3, padding=2, dilation=2, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.b2 = nn.Sequential(nn.Conv2d(32, 16, 3, padding=3, dilation=3, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(32, 16, 1), nn.ReLU())
        self.project = conv_bn(64, 16, 1, act=nn.ReLU)
        self.classifier = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        f = self.backbone(x)
        p = F.interpolate(self.pool(f), size=f.shape[-2:], mode="bilinear", align_corners=False)
        y = self.classifier(self.project(torch.cat([self.b0(f), self.b1(f), self.b2(f), p], 1)))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

# ---------------------------------------------------------------- Whisper encoder


def sinusoids(length: int, channels: int) -> torch.Tensor:
    """Whisper's fixed position embedding: sin and cos of log-spaced timescales."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class AudioBlock(nn.Module):
    """Pre-norm residual attention (``nn.MultiheadAttention``) and GELU MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class WhisperEncoder(nn.Module):
    """Log-mel frames (16 mels x 32 frames) through Conv1d k3 + GELU and Conv1d k3 stride 2 +
    GELU (16 positions), sinusoidal positions, two blocks, final LayerNorm."""

    def __init__(self, mels: int = 16, dim: int = 32, heads: int = 4, frames: int = 32):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, dim, 3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, 3, stride=2, padding=1)
        self.register_buffer("pos", sinusoids(frames // 2, dim))
        self.blocks = nn.Sequential(*(AudioBlock(dim, heads) for _ in range(2)))
        self.ln_post = nn.LayerNorm(dim)

    def forward(self, mel):
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel)))).permute(0, 2, 1)
        return self.ln_post(self.blocks(x + self.pos))

# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Family:
    """A family: its module class, its input (name, shape at batch 2, dtype; the batch axis is
    dynamic in the export) and, for integer ids, the exclusive upper bound of their values."""
    cls: type[nn.Module]
    input_name: str
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    high: int | None = None


FAMILIES: dict[str, Family] = {
    "mobilenet_v3": Family(MobileNetV3, "image", (2, 3, 32, 32)),
    "efficientnet": Family(EfficientNet, "image", (2, 3, 32, 32)),
    "convnext": Family(ConvNeXt, "image", (2, 3, 32, 32)),
    "vit": Family(ViT, "image", (2, 3, 32, 32)),
    "gpt2": Family(GPT2, "input_ids", (2, 16), torch.int64, high=100),
    "unet": Family(UNet, "image", (2, 3, 32, 32)),
    "deeplab": Family(DeepLab, "image", (2, 3, 32, 32)),
    "whisper_encoder": Family(WhisperEncoder, "mel", (2, 16, 32)),
}


def build(name: str, seed: int = 0) -> nn.Module:
    """The family's module in eval mode, weights from ``torch.manual_seed(seed)``; batch-norm
    running statistics and affine parameters randomised (the defaults would fold to identity)."""
    torch.manual_seed(seed)
    model = FAMILIES[name].cls()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            elif isinstance(m, nn.LayerNorm | ChannelsFirstLayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def example_input(name: str, seed: int = 0) -> torch.Tensor:
    """A seeded input of the family's shape: normal floats, or ids in ``[0, high)``."""
    fam = FAMILIES[name]
    g = torch.Generator().manual_seed(seed)
    if fam.high is not None:
        return torch.randint(0, fam.high, fam.shape, generator=g, dtype=fam.dtype)
    return torch.randn(fam.shape, generator=g, dtype=fam.dtype)
