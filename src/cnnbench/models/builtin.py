"""Built-in models: ``trivial``, a tiny convnet for tests and smoke runs.

tf_cnn_benchmarks' ``trivial`` is a single affine layer; ours keeps the shape of a
convnet (conv, batch norm, pooling, classifier) so every engine path is exercised,
while costing almost nothing.
"""

from __future__ import annotations

from torch import Tensor, nn

from cnnbench.models.registry import register_model


class TrivialNet(nn.Module):
    def __init__(self, num_classes: int = 1000, width: int = 8) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(width, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x).flatten(1))


@register_model("trivial", default_image_size=32, default_batch_size=32, min_image_size=16)
def trivial(num_classes: int = 1000, image_size: int = 32) -> nn.Module:
    return TrivialNet(num_classes)
