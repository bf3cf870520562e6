"""The bash the exec shell (exec_shell.py) sends through a sandbox's `exec`, and its report.

A command runs as a background job of its own (its own process group, stdin /dev/null, stdout and
stderr into one file) in a folder of the shell's under /tmp, so it can outlive the `exec` that
started it, as a terminal's command outlives a `run` call. Every `exec` after it waits a bounded
time in the sandbox for the job, then reports: one header line (the shell's marker, the job's
state, the output file's size) and the new output's head and tail, base64-encoded, so nothing
the command prints can pass for the report and any bytes survive a provider's text decoding.

Job states: `r` running; `d:N` done with exit code N; `x:N` the command ended the shell (`exit`)
with N; `k:N` killed by an interrupt that could not stop it otherwise; `g` gone without saying.
"""

from __future__ import annotations

import base64
import re
import shlex

from pydantic import BaseModel

#: Longest one `exec` waits in the sandbox; a longer wait is several.
CHUNK_MS = 60_000


class Report(BaseModel):
    state: str
    size: int
    head: bytes
    tail: bytes


class ReportError(RuntimeError):
    """The sandbox answered without a report (no bash, no /tmp, the sandbox gone)."""


def quote(value: str) -> str:
    return shlex.quote(value)


def job_script(command: str, *, job: str, state: str, cwd: str | None, env: dict[str, str]) -> str:
    """The job: the state of the last command sourced (or the first cwd and env), the command
    eval'ed, then cwd, exported variables and functions saved for the next one. An `exit`
    inside the command leaves no state (the EXIT trap): the next command starts afresh, as a
    restarted terminal does."""
    fresh = [f"cd -- {quote(cwd)} 2>/dev/null" if cwd else ":"]
    fresh += [f"export {k}={quote(v)}" for k, v in env.items()]
    return "\n".join(
        [
            f"__aes_j={quote(job)}; __aes_s={quote(state)}",
            f'if [ -f "$__aes_s" ]; then . "$__aes_s" >/dev/null 2>&1; else {"; ".join(fresh)}; fi',
            'trap \'__aes_rc=$?; [ -f "$__aes_j/rc" ] || { rm -f "$__aes_s"; '
            'echo "x:$__aes_rc" > "$__aes_j/rc.t"; mv -f "$__aes_j/rc.t" "$__aes_j/rc"; }\' EXIT',
            f"eval {quote(command)} </dev/null",
            "__aes_rc=$?",
            '{ export -p; declare -f; printf \'cd -- %q\\n\' "$PWD"; } > "$__aes_s.t" 2>/dev/null'
            ' && mv -f "$__aes_s.t" "$__aes_s"',
            'echo "d:$__aes_rc" > "$__aes_j/rc.t"; mv -f "$__aes_j/rc.t" "$__aes_j/rc"',
            "",
        ]
    )


def launch(script: str, *, base: str, job: str, reset: bool) -> str:
    """Write the job and start it in its own process group (`set -m`), detached from the exec
    (nothing of the exec's stdio kept)."""
    lines = [
        "set -m",
        f"mkdir -p {quote(base)} && rm -rf {quote(job)} && mkdir {quote(job)} || exit 97",
    ]
    if reset:
        lines.append(f"rm -f {quote(base)}/state")
    lines += [
        f"printf '%s' {quote(script)} > {quote(job)}/job || exit 97",
        # From stdin, so bash's own messages read "bash: line N", as the persistent shell's.
        f"bash -s <{quote(job)}/job >{quote(job)}/out 2>&1 &",
        f"echo $! > {quote(job)}/pid",
    ]
    return "\n".join(lines) + "\n"


def wait(job: str, wait_ms: int) -> str:
    """Wait up to `wait_ms` for the job to end (checks 10 ms apart at first, then 250 ms)."""
    return (
        f"__j={quote(job)}; __w={int(wait_ms)}; __t=0; __s=10\n"
        'read -r __p < "$__j/pid" 2>/dev/null\n'
        'while [ ! -f "$__j/rc" ] && [ $__t -lt $__w ] && kill -0 "$__p" 2>/dev/null; do\n'
        "  [ $((__w - __t)) -lt $__s ] && __s=$((__w - __t)); [ $__s -lt 10 ] && __s=10\n"
        '  sleep "$((__s / 1000)).$(printf %03d $((__s % 1000)))"\n'
        "  __t=$((__t + __s)); __s=$((__s * 2)); [ $__s -gt 250 ] && __s=250\n"
        "done\n"
    )


def kill_tree(job: str, grace_ms: int) -> str:
    """Kill the job's command (every descendant of the job's bash, found through /proc) until
    the job says it ended, up to `grace_ms`; past that, the job's bash too (state `k:137`)."""
    return (
        f"__j={quote(job)}; __g={int(grace_ms)}; __t=0\n"
        'read -r __p < "$__j/pid" 2>/dev/null\n'
        "__aes_kill() {\n"
        '  local all=" $__p " more=1 f l pid rest\n'
        "  while [ $more = 1 ]; do more=0\n"
        "    for f in /proc/[0-9]*/stat; do\n"
        '      read -r l < "$f" 2>/dev/null || continue\n'
        "      pid=${l%% *}; rest=${l##*) }; set -- $rest\n"
        '      case "$all" in *" $pid "*) continue;; esac\n'
        '      case "$all" in *" $2 "*) all="$all$pid "; more=1;; esac\n'
        "    done\n"
        "  done\n"
        '  for pid in $all; do [ "$pid" = "$__p" ] || kill -KILL "$pid" 2>/dev/null; done\n'
        "}\n"
        'while [ -n "$__p" ] && [ ! -f "$__j/rc" ] && [ $__t -lt $__g ]; do\n'
        "  __aes_kill; sleep 0.1; __t=$((__t + 100))\n"
        "done\n"
        'if [ -n "$__p" ] && [ ! -f "$__j/rc" ] && kill -0 "$__p" 2>/dev/null; then\n'
        '  __aes_kill; kill -KILL "$__p" 2>/dev/null; rm -f "${__j%/*}/state"\n'
        '  echo "k:137" > "$__j/rc"\n'
        "fi\n"
    )


def report(job: str, *, offset: int, half: int, mark: str) -> str:
    """The job's state and size, then the output past `offset`: its first `half` bytes and its
    last `half` (base64, `--` between). A finished job's folder is removed."""
    return (
        f"__j={quote(job)}; __o={int(offset)}; __h={int(half)}\n"
        'read -r __p < "$__j/pid" 2>/dev/null\n'
        "__st=r\n"
        'if [ -f "$__j/rc" ]; then read -r __st < "$__j/rc"\n'
        'elif ! kill -0 "$__p" 2>/dev/null; then\n'
        '  if [ -f "$__j/rc" ]; then read -r __st < "$__j/rc"; else __st=g; fi\n'
        "fi\n"
        '__n=$(wc -c < "$__j/out" 2>/dev/null); __n=${__n//[!0-9]/}; __n=${__n:-0}\n'
        f'printf \'%s %s %s\\n\' {quote(mark)} "$__st" "$__n"\n'
        "__k=$((__n - __o))\n"
        "if [ $__k -gt 0 ]; then\n"
        "  __hk=$__k; [ $__hk -gt $__h ] && __hk=$__h\n"
        '  tail -c +$((__o + 1)) "$__j/out" | head -c $__hk | base64\n'
        "  echo --\n"
        "  __tk=$((__k - __hk)); [ $__tk -gt $__h ] && __tk=$__h\n"
        '  [ $__tk -gt 0 ] && tail -c +$((__n - __tk + 1)) "$__j/out" | head -c $__tk | base64\n'
        "fi\n"
        'case "$__st" in r) ;; *) rm -rf "$__j";; esac\n'
        "exit 0\n"
    )


_B64 = re.compile(rb"[^A-Za-z0-9+/=]")


def parse(stdout: str, mark: str) -> Report:
    """The report in `stdout` (after whatever the provider printed before it)."""
    found = stdout.find(mark + " ")
    if found < 0:
        raise ReportError(f"no report from the sandbox: {stdout[-300:]!r}")
    header, _, body = stdout[found:].partition("\n")
    parts = header.split()
    if len(parts) != 3 or not parts[2].isdigit():
        raise ReportError(f"a malformed report header: {header[:200]!r}")
    head_text, _, tail_text = body.partition("\n--")
    return Report(
        state=parts[1], size=int(parts[2]), head=_decode(head_text), tail=_decode(tail_text)
    )


def _decode(text: str) -> bytes:
    data = _B64.sub(b"", text.encode("ascii", errors="ignore"))
    return base64.b64decode(data + b"=" * (-len(data) % 4)) if data else b""
