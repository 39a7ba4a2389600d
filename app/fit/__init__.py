"""What fits this GPU: GGUF header -> model shape -> memory -> plan (with hardware and
llama.cpp's dry run). Draws nothing."""
