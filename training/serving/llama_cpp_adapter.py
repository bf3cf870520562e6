"""llama-cpp-python's adapter: the one module that reaches past llama-cpp-python's public API
(tests/test_public_apis.py).

`llama_cpp.server.app.create_app` builds the server's model proxy itself, as a `LlamaProxy`
looked up by name in its own module, and its routes take that proxy from a module global: there is
no parameter, setting or FastAPI dependency through which a server can hand it another proxy (the
chat route reads the global directly, so `app.dependency_overrides` does not reach it). `create_app`
here rebinds that one name for the duration of the call and restores it, so the proxy class is
chosen per app and nothing else in the process sees the change. tests/test_adapters.py fails when
an upgrade builds the proxy another way.

Imported only by the server process (`embedded_serve.py`): llama-cpp-python is heavy.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()


def create_app(proxy_class: type, server_settings: Any, model_settings: list[Any]) -> Any:
    """`llama_cpp.server.app.create_app(server_settings=..., model_settings=...)`, serving every
    route through a `proxy_class(models=model_settings)` instead of a plain `LlamaProxy`."""
    import llama_cpp.server.app as llama_app

    with _lock:
        # By name: the app module imports LlamaProxy without re-exporting it (pyright's
        # reportPrivateImportUsage), and this rebinding is exactly what the module is for.
        original = getattr(llama_app, "LlamaProxy")  # noqa: B009
        setattr(llama_app, "LlamaProxy", proxy_class)  # noqa: B010
        try:
            return llama_app.create_app(
                server_settings=server_settings, model_settings=model_settings
            )
        finally:
            setattr(llama_app, "LlamaProxy", original)  # noqa: B010
