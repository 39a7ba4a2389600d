"""dspine: a local coding assistant on speculative decoding (DSpine drafter)."""
