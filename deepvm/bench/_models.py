"""Sample workloads as PyTorch models with random weights and synthetic batches.

Built from code or transformers configs; nothing is downloaded. One training
step is forward, loss, backward, optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepvm.bench import MissingExtraError, require_torch
from deepvm.performance.workloads import get_workload

__all__ = [
    "BERT_SEQUENCE",
    "GPT2_SEQUENCE",
    "IMAGENET_CLASSES",
    "IMAGE_SIZE",
    "SampleModel",
    "build_model",
]

IMAGE_SIZE = 224
IMAGENET_CLASSES = 1000
GPT2_SEQUENCE = 512
BERT_SEQUENCE = 128


@dataclass
class SampleModel:
    """A model and a function that makes one synthetic batch on a device."""

    name: str
    model: Any  # torch.nn.Module; loss = model(**batch).loss
    make_batch: Callable[[int, Any], dict[str, Any]]  # (batch_size, device) -> kwargs


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise MissingExtraError(
            "this workload needs transformers: pip install 'deepvm[bench]'"
        ) from None
    transformers.logging.set_verbosity_error()
    return transformers


def _images(num_classes: int) -> Callable[[int, Any], dict[str, Any]]:
    import torch

    def make(batch: int, device: Any) -> dict[str, Any]:
        return {
            "pixel_values": torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE, device=device),
            "labels": torch.randint(0, num_classes, (batch,), device=device),
        }

    return make


def _tokens(vocab: int, length: int) -> Callable[[int, Any], dict[str, Any]]:
    import torch

    def make(batch: int, device: Any) -> dict[str, Any]:
        ids = torch.randint(0, vocab, (batch, length), device=device)
        return {"input_ids": ids, "labels": ids.clone()}

    return make


class _TinyMLP:
    """Two linear layers on 64 features: fast enough for tests."""

    @staticmethod
    def build() -> Any:
        import torch
        from torch import nn

        class TinyMLP(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 2))

            def forward(self, features: torch.Tensor, labels: torch.Tensor) -> Any:
                logits = self.net(features)
                loss = nn.functional.cross_entropy(logits, labels)
                return type("Output", (), {"loss": loss, "logits": logits})()

        return TinyMLP()

    @staticmethod
    def make_batch(batch: int, device: Any) -> dict[str, Any]:
        import torch

        return {
            "features": torch.randn(batch, 64, device=device),
            "labels": torch.randint(0, 2, (batch,), device=device),
        }


def build_model(name: str) -> SampleModel:
    """The workload's model with random weights (seeded by the caller)."""
    get_workload(name)  # unknown names fail here, with the list
    require_torch()
    if name == "tiny":
        return SampleModel(name, _TinyMLP.build(), _TinyMLP.make_batch)
    tf = _transformers()
    if name in ("resnet18", "resnet50"):
        if name == "resnet18":
            config = tf.ResNetConfig(
                layer_type="basic",
                depths=[2, 2, 2, 2],
                hidden_sizes=[64, 128, 256, 512],
                num_labels=IMAGENET_CLASSES,
            )
        else:
            config = tf.ResNetConfig(num_labels=IMAGENET_CLASSES)  # the default is ResNet-50
        return SampleModel(name, tf.ResNetForImageClassification(config), _images(IMAGENET_CLASSES))
    if name == "vit-b16":
        config = tf.ViTConfig(image_size=IMAGE_SIZE, patch_size=16, num_labels=IMAGENET_CLASSES)
        return SampleModel(name, tf.ViTForImageClassification(config), _images(IMAGENET_CLASSES))
    if name == "gpt2":
        config = tf.GPT2Config(n_positions=1024)
        return SampleModel(
            name, tf.GPT2LMHeadModel(config), _tokens(config.vocab_size, GPT2_SEQUENCE)
        )
    if name == "bert-base":
        config = tf.BertConfig()
        return SampleModel(
            name, tf.BertForMaskedLM(config), _tokens(config.vocab_size, BERT_SEQUENCE)
        )
    raise AssertionError(f"workload {name!r} is registered but has no builder")
