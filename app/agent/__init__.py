"""The chat's work on the project: where it is, which paths it may touch, the
tools the model calls, what needs the user's consent, and the agent session that
runs the tool rounds and keeps the conversation inside the model's context
(session.py, context.py, compaction.py). No drawing here."""
