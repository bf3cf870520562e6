"""Swap a checkpoint into a running vLLM server (OpenAI-compatible), for both roles at once.

Paths, tried in order:
1. LoRA hot-load: `POST /v1/load_lora_adapter {"lora_name", "lora_path"}`; clients then pass the
   adapter's name as `model=`. Needs the server started with `--enable-lora` and the environment
   variable `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True` (else the route is absent: 404).
2. Full weights: the dev-mode RPC route (`VLLM_SERVER_DEV_MODE=1`), `POST /collective_rpc` with
   `{"method": "reload_weights", "kwargs": {"weights_path": path}}` (recent vLLM workers'
   method); the served name stays the base model's. Bind such a server to 127.0.0.1: the route
   runs arbitrary worker methods.
3. Restart: a callback the deployment supplies (e.g. restart `vllm serve <path>`); returns the
   served model name.
Every failure says which path failed and how to enable the next one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx

from ..policy import Checkpoint, PolicyRef, PolicySwapError

RestartCallback = Callable[[Checkpoint], Awaitable[str]]


def _error_text(response: httpx.Response) -> str:
    """vLLM errors are `{"error": {"message": ...}}` (older: `{"message": ...}`, FastAPI: `{"detail"}`)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
        for key in ("message", "detail"):
            if key in body:
                return str(body[key])
    return str(body)[:500]


def _route_missing(response: httpx.Response) -> bool:
    """FastAPI answers an unknown route with 404 `{"detail": "Not Found"}` (an unknown adapter
    path is also a 404, but with vLLM's own error body)."""
    return response.status_code in (404, 405) and _error_text(response) in (
        "Not Found",
        "Method Not Allowed",
    )


class VLLMPolicyServer:
    """A `PolicyServer` over an already running vLLM server.

    `base_url` is the OpenAI-compatible root ending in `/v1` (as clients use it); the admin routes
    live at the same host (`/v1/load_lora_adapter`) or at its root (`/collective_rpc`).
    """

    def __init__(
        self,
        base_url: str,
        base_model: str,
        *,
        api_key: str | None = None,
        restart: RestartCallback | None = None,
        allow_weight_reload: bool = True,
        timeout_sec: float = 300.0,
        ready_timeout_sec: float = 600.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.root_url = self.base_url.removesuffix("/v1")
        self.base_model = base_model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._restart = restart
        self._allow_reload = allow_weight_reload
        self._timeout = timeout_sec
        self._ready_timeout = ready_timeout_sec
        self._current = PolicyRef(
            model=base_model, base_url=self.base_url, checkpoint_id=None, served_from="vllm:base"
        )

    def current(self) -> PolicyRef:
        return self._current

    async def served_models(self) -> list[str]:
        """Model names the server answers to (`GET /v1/models`)."""
        async with self._client() as client:
            response = await client.get(f"{self.base_url}/models")
        if response.status_code != 200:
            raise PolicySwapError(
                f"GET {self.base_url}/models failed: {response.status_code} {_error_text(response)}"
            )
        return [m["id"] for m in response.json().get("data", [])]

    async def activate(self, checkpoint: Checkpoint) -> PolicyRef:
        failures: list[str] = []
        if checkpoint.kind == "lora":
            try:
                ref = await self._load_lora(checkpoint)
            except PolicySwapError as exc:
                failures.append(f"LoRA hot-load: {exc}")
            else:
                self._current = ref
                return ref
        if self._allow_reload:
            try:
                ref = await self._reload_weights(checkpoint)
            except PolicySwapError as exc:
                failures.append(f"weight reload: {exc}")
            else:
                self._current = ref
                return ref
        if self._restart is not None:
            try:
                model = await self._restart(checkpoint)
                await self._wait_ready(model)
            except Exception as exc:  # noqa: BLE001 - any restart failure is reported the same way
                failures.append(f"restart: {exc}")
            else:
                self._current = PolicyRef(
                    model=model,
                    base_url=self.base_url,
                    checkpoint_id=checkpoint.id,
                    served_from="vllm:restart",
                )
                return self._current
        else:
            failures.append("restart: no restart callback configured")
        raise PolicySwapError(
            f"could not serve checkpoint {checkpoint.id!r} ({checkpoint.kind}) from {self.base_url}; "
            f"still serving {self._current.model!r}. Tried: " + " | ".join(failures)
        )

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self._timeout, headers=self._headers)

    async def _load_lora(self, checkpoint: Checkpoint) -> PolicyRef:
        body = {"lora_name": checkpoint.id, "lora_path": str(checkpoint.path)}
        async with self._client() as client:
            try:
                response = await client.post(f"{self.base_url}/load_lora_adapter", json=body)
            except httpx.HTTPError as exc:
                raise PolicySwapError(f"server unreachable at {self.base_url}: {exc}") from exc
        if _route_missing(response):
            raise PolicySwapError(
                "the server has no /v1/load_lora_adapter route: start it with --enable-lora and "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            )
        if response.status_code == 400 and "already been loaded" in _error_text(response):
            pass  # the same id was loaded before (e.g. a retried swap): it is served, use it
        elif response.status_code != 200:
            raise PolicySwapError(f"{response.status_code}: {_error_text(response)}")
        models = await self.served_models()
        if checkpoint.id not in models:
            raise PolicySwapError(
                f"adapter {checkpoint.id!r} reported loaded but /v1/models lists {models}"
            )
        return PolicyRef(
            model=checkpoint.id,
            base_url=self.base_url,
            checkpoint_id=checkpoint.id,
            served_from="vllm:lora",
        )

    async def _reload_weights(self, checkpoint: Checkpoint) -> PolicyRef:
        if checkpoint.kind != "full":
            raise PolicySwapError(
                "only full-weight checkpoints can be reloaded in place (merge the "
                "adapter first, or enable LoRA on the server)"
            )
        body = {"method": "reload_weights", "kwargs": {"weights_path": str(checkpoint.path)}}
        async with self._client() as client:
            try:
                response = await client.post(f"{self.root_url}/collective_rpc", json=body)
            except httpx.HTTPError as exc:
                raise PolicySwapError(f"server unreachable at {self.root_url}: {exc}") from exc
        if _route_missing(response):
            raise PolicySwapError(
                "the server has no /collective_rpc route: start it with "
                "VLLM_SERVER_DEV_MODE=1 (bound to 127.0.0.1)"
            )
        if response.status_code != 200:
            raise PolicySwapError(f"{response.status_code}: {_error_text(response)}")
        # The served name does not change: clients keep `model=<base>` and get the new weights.
        return PolicyRef(
            model=self.base_model,
            base_url=self.base_url,
            checkpoint_id=checkpoint.id,
            served_from="vllm:reload",
        )

    async def _wait_ready(self, model: str) -> None:
        deadline = time.monotonic() + self._ready_timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                if model in await self.served_models():
                    return
                last = f"{model!r} not listed yet"
            except (PolicySwapError, httpx.HTTPError) as exc:
                last = str(exc)
            await asyncio.sleep(1.0)
        raise PolicySwapError(
            f"restarted server did not serve {model!r} within {self._ready_timeout:.0f}s ({last})"
        )
