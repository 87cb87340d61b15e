"""``cnnbench make-dataset imagefolder|cifar10|cifar100 DIR``: write a small, valid, learnable data set.

The images are generated (class-dependent shapes and colours with noise), not photographs:
for demos, tests and benchmarks of the input pipeline. ``DIR`` must be empty or absent; the
arguments' bounds are :class:`cnnbench.data.generate.GenerateOptions`' (exit 2 before anything
is written), and a failure while writing leaves no partial data set (exit 1).
"""

from __future__ import annotations

import argparse
import time

from cnnbench.cli.common import UserError
from cnnbench.words import plural


def register(sub: argparse._SubParsersAction) -> None:
    from cnnbench.data.layouts import GENERATED_FORMATS as FORMATS
    from cnnbench.data.layouts import GENERATED_KINDS as KINDS

    p = sub.add_parser(
        "make-dataset",
        help="Write a small generated data set (ImageNet folder layout or CIFAR batches) for demos and tests.",
        description="Write a small, valid data set that `cnnbench run --data-dir` and `cnnbench data` read: "
        "JPEG or PNG files in the ImageNet layout (train/<class>/, val/<class>/), or CIFAR-10/100 python "
        "batches. Images are generated, not photographs: each class is a shape in a colour of its own, at a "
        "random place and size over a random background, with pixel noise (a model can learn them).",
    )
    p.add_argument("kind", choices=KINDS, help="Layout to write.")
    p.add_argument("dir", metavar="DIR", help="Folder to write (empty or absent).")
    p.add_argument("--num-classes", type=int, default=None, metavar="N",
                   help="Classes (imagefolder), 1..1000 [default: 10; CIFAR-10 has 10 and CIFAR-100 100 by "
                   "definition].")
    p.add_argument("--images-per-class", type=int, default=20, metavar="N",
                   help="Training images per class, 1..100000 [default: 20].")
    p.add_argument("--val-images-per-class", type=int, default=None, metavar="N",
                   help="Validation (test) images per class [default: a fifth of --images-per-class, at least 1].")
    p.add_argument("--image-size", default=None, metavar="PX|WxH",
                   help="imagefolder: image size, 64 or 500x375 (width x height), 8..4096 px a side "
                   "[default: 64]; CIFAR is 32.")
    p.add_argument("--format", dest="image_format", choices=FORMATS, default="jpeg",
                   help="imagefolder: file format [default: jpeg].")
    p.add_argument("--quality", type=int, default=90, metavar="Q", help="JPEG quality, 1..100 [default: 90].")
    p.add_argument("--seed", type=int, default=0, help="Random seed (the same arguments write the same files).")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cnnbench.data.generate import GenerateError, make_data_set, parse_size

    start = time.perf_counter()
    try:
        size = parse_size(args.image_size) if args.image_size is not None else None
        made = make_data_set(args.kind, args.dir, num_classes=args.num_classes,
                             images_per_class=args.images_per_class,
                             val_images_per_class=args.val_images_per_class, image_size=size,
                             image_format=args.image_format, quality=args.quality, seed=args.seed)
    except GenerateError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot write {args.dir}: {exc.strerror or exc}", exit_code=1) from None
    print(f"wrote {made.kind}: {made.train_images:,} training and {made.val_images:,} validation images, "
          f"{plural(made.num_classes, 'class', 'classes')}, {made.bytes_written / 2**20:.1f} MiB, to {made.root} "
          f"in {time.perf_counter() - start:.1f} s (generated images, not photographs)")
    return 0
