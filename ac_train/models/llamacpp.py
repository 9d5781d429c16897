"""llama-cpp-python's OpenAI-compatible server as a child process, on loopback.

    with llamacpp_server([(smollm2_gguf_path(), "smollm2")]) as url:
        OpenAIChatPolicy.served(url, "smollm2", SamplingConfig(), tokenizer=tokenizer)

Needs ``llama-cpp-python[server]`` (``bash scripts/llamacpp.sh install``). Several models are
served by alias from one config file; the server holds one in memory and loads another from its
file when a request names it (which is how a served sampler's weights are swapped:
``ac_train.models.served_sampler``). ``n_ctx`` is the context window it allocates.

``quantize_q8_0`` shrinks a float32 GGUF (what ``ac_train.models.gguf_export`` writes) to 8-bit
weights, which llama.cpp decodes several times faster than float32.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

START_TIMEOUT_S = 120.0
_FTYPE_Q8_0 = 7  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0


def quantize_q8_0(source: Path, out: Path, threads: int = 0) -> Path:
    """Write ``source``'s weights as Q8_0 to ``out`` (via a temporary sibling renamed into
    place). RuntimeError naming both files when llama.cpp refuses."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = _FTYPE_Q8_0
    params.nthread = threads
    partial = out.with_name(f".{out.name}.partial")
    status = llama_cpp.llama_model_quantize(
        str(source).encode(), str(partial).encode(), ctypes.byref(params)
    )
    if status != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not quantize {source} to {out} (status {status})")
    os.replace(partial, out)
    return out


def server_config(
    models: Sequence[tuple[Path, str]], port: int, n_ctx: int = 8192, threads: int | None = None
) -> str:
    """The server's ``--config_file`` JSON: each ``(gguf, alias)``, the first loaded at start.
    ``threads``: for decoding and for prompts (None: the server's defaults, which decode on
    half the cores)."""
    settings = {} if threads is None else {"n_threads": threads, "n_threads_batch": threads}
    return json.dumps(
        {
            "host": "127.0.0.1",
            "port": port,
            "models": [
                {"model": str(path), "model_alias": alias, "n_ctx": n_ctx, **settings}
                for path, alias in models
            ],
        },
        indent=2,
    )


@contextmanager
def llamacpp_server(
    models: Sequence[tuple[Path, str]],
    n_ctx: int = 8192,
    port: int = 0,
    threads: int | None = None,
) -> Iterator[str]:
    """Serve each ``(gguf, alias)``; yields the base URL (``http://127.0.0.1:PORT/v1``) once
    ``GET /models`` answers; stops the server on exit. ``port`` 0: a free one (a fixed port
    keeps the URL, and so a run's recorded worker, the same across resumed runs).
    RuntimeError with the end of the server's log when it does not start within
    ``START_TIMEOUT_S``."""
    if port == 0:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory(prefix="ac-llamacpp-") as folder:
        config = Path(folder) / "server.json"
        config.write_text(server_config(models, port, n_ctx, threads), encoding="utf-8")
        command = [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)]
        with (Path(folder) / "server.log").open("w+b") as log:
            yield from _serving(command, url, log)


def _serving(command: list[str], url: str, log: IO[bytes]) -> Iterator[str]:
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_serving(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_serving(url: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as response:
                json.loads(response.read())
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                tail = log.read().decode("utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"llama_cpp.server did not start at {url}: {tail}") from None
            time.sleep(0.5)
