"""The engines: llama-cpp-python in process, llama-server (stock and patched), the remote
engine, on generated and real models."""
