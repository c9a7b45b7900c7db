"""Fetching and checking pretrained weights from the command line, for the family that downloads them (GPT-2):

    python -m attn_core.models.pretrained download [NAME] [--dir D]   # NAME: one of the family's sizes
    python -m attn_core.models.pretrained check [D]      # verify a folder (default: every one found here)
    python -m attn_core.models.pretrained list           # the models of that family found on this machine

Problems are one plain line on stderr and exit status 1. The app never downloads: it lists what is here
(:func:`attn_core.models.registry.find_models`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from attn_core.models.hf_weights import WEIGHTS_FILE
from attn_core.models.registry import families


def downloading_family():
    """The registered family that fetches weights (it has ``downloads``: the names ``download`` takes)."""
    return next(f for f in families() if getattr(f, "downloads", ()))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring); problems are one plain line and exit status 1."""
    fam = downloading_family()
    ap = argparse.ArgumentParser(prog="python -m attn_core.models.pretrained", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help=f"fetch a {fam.title} size from Hugging Face, then check it")
    d.add_argument("name", nargs="?", default=fam.downloads[0], choices=list(fam.downloads))
    d.add_argument("--dir", help="put the files in DIR/<name> instead of the Hugging Face cache")
    c = sub.add_parser("check", help=f"verify a {fam.title} folder (default: every one found here)")
    c.add_argument("folder", nargs="?")
    sub.add_parser("list", help=f"the {fam.title} folders found here")
    args = ap.parse_args(argv)
    if args.command == "download":
        try:
            path = fam.download(args.name, args.dir)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"ok: {path}: {fam.describe(path)}")
        if args.dir:
            print(f"use it with: {fam.env_var}={Path(args.dir).expanduser().resolve()}")
        return 0
    if args.command == "check" and args.folder:
        folder = Path(args.folder).expanduser()
        # a model folder or file itself, else a folder of model folders
        targets = fam.folders_in(folder) if folder.is_dir() and not (folder / WEIGHTS_FILE).exists() else []
        targets = targets or [(folder.name, folder)]
    else:
        targets = [(f.name, f.path) for f in fam.find()]
    if not targets:
        print(fam.how_to_get(), file=sys.stderr)
        return 1
    if args.command == "list":
        for name, path in targets:
            print(f"{name}\t{path}")
        return 0
    failed = 0
    for _, path in targets:
        try:
            print(f"ok: {path}: {fam.describe(path)}")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
