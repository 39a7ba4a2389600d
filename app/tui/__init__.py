"""The Textual chat: `dspine chat`."""
