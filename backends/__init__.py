"""Inference engines behind one small interface (llama-server, in-process, remote)."""
