"""Policy servers both roles call: the embedded llama.cpp server (set-up, GGUF conversion, the server process) and checkpoint swaps into vLLM."""
