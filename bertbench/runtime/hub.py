"""Whether the Hugging Face hub can be asked at all, before a download whose client would retry for ~25 s."""
from __future__ import annotations

import os
from typing import Optional


def hub_unreachable() -> Optional[str]:
    """Why the hub cannot be asked, when its host name does not resolve (a machine without network); else None.
    Without this, such a machine waits through the hub client's retries (five, ~25 s, a line each) before the
    same error or skip."""
    import socket
    from urllib.parse import urlparse

    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None  # behind a proxy the proxy resolves the name, and this machine may not
    host = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co").hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError as err:
        return f"{host} does not resolve: {err.strerror or err}"
    return None
