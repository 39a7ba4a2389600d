"""dspine: a local coding assistant on speculative decoding (DSpine drafter)."""

__version__ = "0.1.0"
