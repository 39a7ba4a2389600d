"""`dspine serve`: the fitted engine behind a thin local OpenAI / Anthropic proxy
that sees every request's figures."""
