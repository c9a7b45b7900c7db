"""Which devices attention can run on here, and picking one by name."""

from __future__ import annotations

import torch

from attn_core.messages import Problem


def _mps_usable() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[str]:
    """Device strings usable on this machine: ``"cpu"`` always, then ``"cuda:N"`` and ``"mps"``."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_usable():
        devices.append("mps")
    return devices


def pick_device(preference: str = "auto") -> torch.device:
    """``"auto"``: cuda > mps > cpu. Otherwise the named device (``"cuda"`` means ``"cuda:0"``).

    An unknown or unavailable name raises ``ValueError`` listing what is available.
    """
    available = available_devices()
    pref = (preference or "auto").strip().lower()
    if pref == "auto":
        for prefix in ("cuda", "mps"):
            for name in available:
                if name.startswith(prefix):
                    return torch.device(name)
        return torch.device("cpu")
    if pref == "cuda":
        pref = "cuda:0"
    if pref not in available:
        raise Problem("device {device!r} is not available here; choose one of: {devices}", device=preference,
                      devices=", ".join(available))
    return torch.device(pref)
