"""The chat's work on the project: where it is, which paths it may touch, the
tools the model calls, and what needs the user's consent. No drawing here."""
