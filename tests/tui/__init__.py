"""The chat: Textual's pilot, SVG snapshots (in __snapshots__/ beside them), and the real terminal through tmux."""
