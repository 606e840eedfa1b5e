"""The three workloads' model definitions (PyTorch modules, traced with torch.fx by `workloads`). Only the
shapes matter: the modules are built on the ``meta`` device, so no weights are allocated or downloaded."""

from __future__ import annotations

import math

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1, self.bn1 = nn.Conv2d(in_channels, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet(nn.Module):
    """He et al. 2016, the ImageNet ResNets with bottleneck blocks (``blocks=(3, 4, 6, 3)`` is ResNet-50)."""

    def __init__(self, blocks: tuple[int, ...], num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1))
        layers, channels = [], 64
        for stage, count in enumerate(blocks):
            width = 64 * 2**stage
            for block in range(count):
                layers.append(Bottleneck(channels, width, 2 if block == 0 and stage > 0 else 1))
                channels = width * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_size = heads, hidden // heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.dense, self.norm = nn.Linear(hidden, hidden), nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(0.1)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        query, key, value = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(query, key.transpose(-1, -2)) / math.sqrt(self.head_size)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, value).permute(0, 2, 1, 3)
        context = context.reshape(x.shape)
        return self.norm(self.dropout(self.dense(context)) + x)


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.intermediate, self.output = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
        self.norm, self.dropout, self.gelu = nn.LayerNorm(hidden), nn.Dropout(0.1), nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.attention(x)
        return self.norm(self.dropout(self.output(self.gelu(self.intermediate(x)))) + x)


class Bert(nn.Module):
    """Devlin et al. 2019, the encoder with a pooler; BERT-large sizes by default."""

    def __init__(self, layers: int = 24, hidden: int = 1024, heads: int = 16, intermediate: int = 4096,
                 vocab: int = 30522, length: int = 128) -> None:
        super().__init__()
        self.words, self.positions = nn.Embedding(vocab, hidden), nn.Embedding(512, hidden)
        self.token_types = nn.Embedding(2, hidden)
        self.register_buffer("position_ids", torch.arange(length)[None])
        self.register_buffer("token_type_ids", torch.zeros(1, length, dtype=torch.long))
        self.norm, self.dropout = nn.LayerNorm(hidden), nn.Dropout(0.1)
        self.encoder = nn.Sequential(*(EncoderLayer(hidden, heads, intermediate) for _ in range(layers)))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        embedded = self.words(input_ids) + self.positions(self.position_ids) + self.token_types(self.token_type_ids)
        hidden = self.encoder(self.dropout(self.norm(embedded)))
        return torch.tanh(self.pooler(hidden[:, 0]))


MODELS = {
    "resnet50": (lambda: ResNet((3, 4, 6, 3)), (1, 3, 224, 224)),
    "resnet101": (lambda: ResNet((3, 4, 23, 3)), (1, 3, 224, 224)),
    "bert": (Bert, (1, 128)),  # BERT-large, 128 tokens
    "bert_base": (lambda: Bert(layers=12, hidden=768, heads=12, intermediate=3072), (1, 128)),
}
