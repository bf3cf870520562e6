"""llama-cpp-python's chat handler for the policy's chat format (training/chat_format.py).

llama-cpp-python's own tool handler (`chatml-function-calling`) drops `tool` messages and tool
descriptions from the prompt (measured: a 300-word tool result or description added 0 prompt
tokens). This handler renders a request with the policy's template — the text the trainer
tokenizes — through llama-cpp-python's `Jinja2ChatFormatter` (transformers' Jinja settings),
tokenizes it with the model's own vocabulary (special tokens parsed), generates, and splits the
reply into content and tool calls as TRL's parser for that template does. `prompt_ids` is the one
function both a chat request and the server's `/tokenize` route use.

Registered by name with llama-cpp-python's public registry (`register_chat_completion_handler`)
and chosen with `chat_format=<name>`. Runs only in the server process.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ..chat_format import (
    CHATML_TOKENS,
    END_OF_TURN,
    ChatFormatError,
    ParsedReply,
    parse_reply,
    wire_to_template,
)

HANDLER_NAME = "autoenvscaling-policy"


class ToolChatHandler:
    """A `LlamaChatCompletionHandler` (llama_cpp.llama_chat_format) for one chat template."""

    def __init__(self, template: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        # The template reads no bos/eos variables; generation stops at the end-of-turn token.
        self._formatters = {
            flag: Jinja2ChatFormatter(
                template=template, eos_token=END_OF_TURN, bos_token="", add_generation_prompt=flag
            )
            for flag in (True, False)
        }
        self._checked: set[int] = set()

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> str:
        formatter = self._formatters[add_generation_prompt]
        return formatter(messages=wire_to_template(messages), tools=tools or None).prompt  # pyright: ignore[reportArgumentType]

    def prompt_ids(
        self,
        llama: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """The token ids the model conditions on for this request."""
        self._check_vocabulary(llama)
        text = self.render(messages, tools, add_generation_prompt=add_generation_prompt)
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _check_vocabulary(self, llama: Any) -> None:
        if id(llama) in self._checked:
            return
        for token in CHATML_TOKENS:
            if len(llama.tokenize(token.encode(), add_bos=False, special=True)) != 1:
                raise ChatFormatError(
                    f"the served model's vocabulary has no single token {token!r}: the policy's "
                    "chat format is ChatML-based; serve a ChatML model or pass chat_template"
                )
        self._checked.add(id(llama))

    def __call__(
        self,
        *,
        llama: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        functions: list[dict[str, Any]] | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: str | list[str] | None = None,
        seed: int | None = None,
        max_tokens: int | None = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        model: str | None = None,
        logit_bias: dict[str, float] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        grammar: Any = None,
        logits_processor: Any = None,
        **_: Any,
    ) -> dict[str, Any] | Iterator[dict[str, Any]]:
        if functions and not tools:  # the legacy form of the same schemas
            tools = [{"type": "function", "function": f} for f in functions]
        prompt = self.prompt_ids(llama, messages, tools)
        forced = forced_tools(tools, tool_choice)
        if forced:  # "required" or a named function: the reply must be one call (vLLM does so too)
            grammar = tool_call_grammar(forced)
        stops = [END_OF_TURN, *([stop] if isinstance(stop, str) else (stop or []))]
        completion: Any = llama.create_completion(
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            typical_p=typical_p,
            stop=stops,
            seed=seed,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            repeat_penalty=repeat_penalty,
            logprobs=(top_logprobs or 0) if logprobs else None,
            logit_bias=logit_bias,
            grammar=grammar,
            logits_processor=logits_processor,
            model=model,
            stream=False,
        )
        choice = completion["choices"][0]
        text = choice["text"]
        reply = parse_reply(text) if tools and tool_choice != "none" else ParsedReply(content=text)
        response = _chat_response(completion, reply, _chat_logprobs(choice.get("logprobs")))
        return _as_chunks(response) if stream else response


def forced_tools(tools: list[dict[str, Any]] | None, tool_choice: Any) -> list[dict[str, Any]]:
    """The tools a reply must call one of: all for "required", one for a named function, none
    for "auto" / "none" (the model then chooses, as it does in training)."""
    if not tools:
        return []
    if tool_choice == "required":
        return tools
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        return [t for t in tools if t.get("function", {}).get("name") == name]
    return []


def tool_call_grammar(tools: list[dict[str, Any]]) -> Any:
    """A llama.cpp grammar for exactly one call, written as the template writes calls."""
    from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": t["function"].get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
        }
        for t in tools
    ]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    body = json_schema_to_gbnf(json.dumps(schema), prop_order=["name", "arguments"])
    body = body.replace("root ::=", "call ::=", 1)
    return LlamaGrammar.from_string(
        f'root ::= "<tool_call>\\n" call "\\n</tool_call>"\n{body}', verbose=False
    )


def _chat_response(
    completion: dict[str, Any], reply: ParsedReply, logprobs: dict[str, Any] | None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    finish = completion["choices"][0]["finish_reason"]
    if reply.tool_calls:
        message["content"] = reply.content or None
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in reply.tool_calls
        ]
        finish = "tool_calls"
    return {
        "id": f"chat{completion['id']}",
        "object": "chat.completion",
        "created": completion.get("created", int(time.time())),
        "model": completion["model"],
        "choices": [
            {"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}
        ],
        "usage": completion["usage"],
    }


def _chat_logprobs(text_logprobs: dict[str, Any] | None) -> dict[str, Any] | None:
    """A text completion's logprobs in the chat form (OpenAI: one entry per generated token)."""
    if not text_logprobs:
        return None
    return {
        "content": [
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode("utf-8")),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))}
                    for t, lp in (top or {}).items()
                ],
            }
            for token, logprob, top in zip(
                text_logprobs["tokens"],
                text_logprobs["token_logprobs"],
                text_logprobs.get("top_logprobs") or [None] * len(text_logprobs["tokens"]),
                strict=False,
            )
        ],
        "refusal": None,
    }


def _as_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A finished reply as a stream (role, content, tool calls, finish): the reply is parsed
    whole, so its tool calls are never streamed half-written."""
    choice = response["choices"][0]
    message = choice["message"]
    head = {k: response[k] for k in ("id", "created", "model")}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        yield chunk({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, choice["finish_reason"], usage=response["usage"])


def register(template: str) -> ToolChatHandler:
    """Register a handler for `template` under HANDLER_NAME (replacing an earlier one)."""
    from llama_cpp.llama_chat_format import LlamaChatCompletionHandlerRegistry

    handler = ToolChatHandler(template)
    LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        HANDLER_NAME,
        handler,
        overwrite=True,
    )
    return handler


__all__ = ["HANDLER_NAME", "ToolChatHandler", "forced_tools", "register", "tool_call_grammar"]
